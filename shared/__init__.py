"""The common library every service uses: models, config, store, wire messages, settings."""
