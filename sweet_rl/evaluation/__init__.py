"""Scoring frontend pages: CLIP similarity, preference pairs and win rate."""
