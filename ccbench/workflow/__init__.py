"""The one layer with side effects: it measures, analyses, writes and presents, in that order."""
