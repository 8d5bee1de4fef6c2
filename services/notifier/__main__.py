from services.notifier.service import start
from shared.service import main

if __name__ == "__main__":
    main("notifier", start, needs_db=True)
