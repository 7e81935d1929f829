"""Kafka mode under a backlog: the one figure the claim and the outbox share (ADR 0025).

While a partition's keys arrive faster than a replica takes them, the hybrid claim
source's fair polling claim takes runs due at least this long, and the outbox relay
publishes only runs fresher than this: the two take different rows, so neither waits on
the other. A key is normally consumed within ~0.1 s of its run falling due, so a run 1 s
late has a key stuck behind the backlog (or none).
"""

BACKLOG_GRACE_SECONDS = 1.0

# While backlogged, the most keys of one tenant an outbox pass publishes (a pass every
# 0.2 s: ~1,000 keys a second a tenant). Each due tenant's first keys still go out every
# pass, so a quiet tenant's fresh run is claimed by its key; a burst's keys no longer run
# ahead of the claims (ADR 0063).
BACKLOG_KEYS_PER_TENANT = 200
