"""Artifacts: schema-validated files, result directories, the manifest and exports."""
