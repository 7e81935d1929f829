"""Cryptography adapters (the ``cryptography`` package): the key ring and the envelope box."""
