"""Pages to pictures: a local page server, a sandboxed browser, a pool of browsers, the
offline assets, the screenshot files and the pictures the scorers read."""
