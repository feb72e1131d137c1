"""What a broker embeds to take part in the cluster: registration, heartbeats, controlled shutdown
(and, later, the metadata client of DESIGN §7)."""
