"""Peer implementations and bindings used by tools/bench/peer_bench.py."""
