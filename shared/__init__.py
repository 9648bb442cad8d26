"""The common library every service uses, in packages that say what they hold: models, config,
store, messaging, observability, runtime, kube, lifecycle."""
