from services.scheduler.service import start
from shared.service import main

if __name__ == "__main__":
    main("scheduler", start, needs_db=True)
