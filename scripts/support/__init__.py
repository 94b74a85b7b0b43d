"""What tests, benchmarks and the reliability soak share and the product never uses.

Generators of histories and clusters, rigs, the in-memory fake of the ZooKeeper store, and fault
helpers live here, outside ``controller_core``, ``dashboard`` and ``workers``: the product packages
never import ``scripts`` (a ``lint-imports`` contract), and scripts never import ``tests``, so both
the test suite and the benchmarks import from here.
"""
