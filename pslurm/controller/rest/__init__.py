"""The controller's user API over HTTP/JSON (slurmrestd's shape where the two overlap).

``access`` holds what the API and the gRPC servicer share (who may see what, the cluster's view,
errors as kinds); ``routes`` the handlers, ``server`` the aiohttp server in its own thread,
``relay`` a job's input and output to and from its node's agent, ``openapi`` the description.
Importing this package imports neither aiohttp nor gRPC.
"""
