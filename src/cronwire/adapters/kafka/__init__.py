"""Kafka mode's adapters (aiokafka): topic and broker link, key publisher, hint consumer."""
