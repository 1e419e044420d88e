"""The identity directory: people, departments and channel accounts per organisation (docs/identity.md)."""
