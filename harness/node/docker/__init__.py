"""The Docker backend of the node interface: the engine, containers as nodes, clusters, images
and the doctor."""
