"""The metadata shell: a MetadataImage as a tree of directories and files, and commands over it."""
