"""Applications built on the library (not Hub-bound): the sentiment demo, the tour, figures of RoPE with their
analysis, similar-sentence generation with RoFormer-Sim and extractive question answering. The command line runs
them; each is also usable from Python."""
