"""Peer implementations and bindings used by tools/peer_bench.py."""
