"""The Textual UI of the findings."""
