"""The argument parser class every gpuconf (sub)command uses."""

from __future__ import annotations

import argparse


class Parser(argparse.ArgumentParser):
    """argparse, with bad input as one line that names the fix, and exit 2."""

    def error(self, message: str):
        self.exit(2, f"gpuconf: error: {message} (see `{self.prog} --help`)\n")


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """--kubeconfig and --context, for the commands that talk to a cluster."""
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig of the cluster")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
