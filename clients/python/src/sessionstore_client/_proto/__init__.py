"""Protocol buffer modules compiled from the API's .proto by `make proto`."""
