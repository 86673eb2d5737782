"""``gpuconf``: the command line. Each ``*_commands`` module registers one group of
subcommands; ``main`` builds the parser from them and turns every error into one line and an
exit code.
"""
