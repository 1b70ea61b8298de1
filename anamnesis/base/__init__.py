"""The shared base every domain stands on: paths of a store, settings, the store lock, the one
git runner, atomic files, errors and their exit codes, text helpers, and the note file format.

Every module here is public and imports nothing above it (checked by import-linter).
"""
