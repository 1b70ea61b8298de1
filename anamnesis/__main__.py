"""`python -m anamnesis` is the same as the `anamnesis` command."""

from anamnesis.cli import main

if __name__ == "__main__":
    main()
