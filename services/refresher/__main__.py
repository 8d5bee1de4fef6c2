from services.refresher.service import start
from shared.service import main

if __name__ == "__main__":
    main("refresher", start, needs_db=True)
