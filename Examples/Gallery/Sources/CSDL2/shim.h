// SDL2's public header as Debian's libsdl2-dev installs it (/usr/include/SDL2); its own
// includes are relative, so no -I flag is needed.
#include <SDL2/SDL.h>
