"""Templates that `anamnesis` renders: note skeletons, systemd units, launchd plists."""
