/* A shared library that is not a layerdiff plugin: it does not export
 * layerdiff_backend_plugin(). */
int layerdiff_something_else(void);

int layerdiff_something_else(void)
{
    return 42;
}
