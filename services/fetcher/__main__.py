from services.fetcher.service import start
from shared.service import main

if __name__ == "__main__":
    main("fetcher", start, needs_db=False)
