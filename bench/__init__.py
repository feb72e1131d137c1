"""sparkraft's benchmark suite: ``python -m bench --help``. See bench/README.md."""
