from services.fetcher.render.service import start
from shared.service import main

if __name__ == "__main__":
    main("renderer", start, needs_db=False)
