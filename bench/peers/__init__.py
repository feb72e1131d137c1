"""Other Raft implementations measured in the same run as sparkraft, for ratios."""
