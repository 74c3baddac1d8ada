"""The stages' entry points. ``scripts/*.py`` are thin ``fire`` wrappers around these ``main``s."""
