"""Big-model inference: empty-weight init, device maps, offload, hooks and dispatch."""
