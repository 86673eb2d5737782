"""Sharing suite: time-slicing/MPS config, advertised replicas, oversubscription, interference."""
