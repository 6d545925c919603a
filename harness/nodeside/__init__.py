"""Layer 0: stdlib-only code shipped to nodes (the wire protocol, the agent, the holder client API).

Nodes have no fencecheck installation and reach no package index, so nothing here may import
anything outside the standard library or this package: the files are copied to nodes as they are.
"""
