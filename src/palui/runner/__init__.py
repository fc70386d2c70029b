"""The turn runner: one governed turn from trigger to answer, with pauses (spec §3-§6)."""
