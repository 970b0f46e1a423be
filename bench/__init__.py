"""bench: benchmarks of agent-actors against raw baselines.

``python -m bench.echo`` times an echo call through the full stack beside a raw pyzmq+msgpack
loop; ``_common`` holds what every benchmark shares (percentiles, reports, plots, processes).
"""
