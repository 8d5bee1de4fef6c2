from services.parser.service import start
from shared.service import main

if __name__ == "__main__":
    main("parser", start, needs_db=False)
