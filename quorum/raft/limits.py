"""Bounds on what a message may make the Raft core do (read through the module, ``limits.X``, so a
test that removes a bound removes it everywhere)."""
MAX_EPOCH = (1 << 31) - 1  # epochs are int32, as in Kafka: a message beyond it is malformed
# A Vote may not move a voter's epoch further than this past what it knows (its epoch, its log's
# last epoch). A real candidate is its last leader's epoch plus its failed elections since, which
# pre-vote keeps to a handful; one message must not be able to spend the epoch space.
MAX_EPOCH_JUMP = 10_000
