"""cronwire: a multi-tenant durable cron service."""
