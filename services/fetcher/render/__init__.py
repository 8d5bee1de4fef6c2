"""The renderer: pages loaded in headless Chromium, for sources that set ``render``."""
