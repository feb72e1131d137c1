module github.com/sparkraft/sparkraft/tests/linearizability/checker

go 1.18

require github.com/anishathalye/porcupine v1.3.1
