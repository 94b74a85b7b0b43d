"""The wire protocol between the controller and the broker agents: HTTP/1.1 + JSON (docs/protocol.md).

* ``messages`` -- every message as a msgspec ``Struct``, its paths, and strict encoding/decoding;
* ``client`` -- the keep-alive client (``JsonConnection``) and the controller's advertised address;
* ``server`` -- the routed server (``JsonHttpServer``) the broker agent and test doubles serve with.
"""
