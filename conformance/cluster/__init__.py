"""Cluster access: the one layer that talks to a Kubernetes API server.

A retrying, counting client; waits with a description and a timeout; labelled namespaces;
test pods and workloads; reads of nodes, operands and the ClusterPolicy; failure evidence;
the allocation lock; least-privilege RBAC.
"""
