"""Inference suite: AI services on the platform, with real pods and real HTTP (the CNCF
Kubernetes AI Conformance MUSTs ai_service_metrics and, later, ai_inference).

On the sim every check is not run, with the reason: KWOK pods serve no HTTP.
"""
