// Models library anchor; each model builder has its own file in models/.
#include "models.h"
