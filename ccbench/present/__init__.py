"""Presentation: terminal tables (rich), report pages (Markdown, HTML), figures (matplotlib, imported
lazily), comparisons and traces shown; ``kinds`` says what each run kind shows.

May import: every stage below (core, store, algorithms, measure, analysis); never commands.
Computes no statistic: every number shown comes from a stored row or an analysis result.
"""
