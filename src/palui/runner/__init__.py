"""The turn runner: one governed turn from trigger to answer, with pauses (SPEC §3-§6)."""
