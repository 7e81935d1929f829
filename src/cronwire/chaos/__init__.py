"""`cronwire chaos`: fault injection against real replicas, counted from the receiver."""
