"""Pinned versions of every binary the project builds (control plane, node), and their cache."""
